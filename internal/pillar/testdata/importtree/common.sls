ntp:
  servers: [a.pool, b.pool]
debug: off
