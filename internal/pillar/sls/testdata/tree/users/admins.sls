include:
  - users.base:
      key: 'accounts:base'
users:
  alice:
    uid: 1000
    shell: /bin/zsh
