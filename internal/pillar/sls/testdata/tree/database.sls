postgres:
  version: 16
  password: |
    -----BEGIN PGP MESSAGE-----
    hQEMA0x1ZZZZZZZZAQf/abcdef
    -----END PGP MESSAGE-----
