apt:
  mirror: http://deb.debian.org
