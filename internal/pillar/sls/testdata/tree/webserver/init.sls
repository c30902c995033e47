include:
  - .tls
  - common
apache:
  port: 80
  modules: [ssl, rewrite]
motd: web server
