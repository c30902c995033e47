users:
  root:
    uid: 0
