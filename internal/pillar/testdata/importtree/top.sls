base:
  '*':
    - common
  web01:
    - users
  'web01,web02':
    - match: list
    - web
