db:
  role: primary
