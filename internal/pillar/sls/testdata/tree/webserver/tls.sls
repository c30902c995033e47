apache:
  port: 443
  tls: true
  modules: [ssl]
