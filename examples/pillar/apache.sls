apache:
  port: 80
  modules: [ssl, rewrite]
