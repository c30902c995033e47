# A pillar top file exercising every rule of package sls.
base:
  '*':
    - common
    - empty
  web1:
    - webserver
    - users.admins
  'web2,web3':
    - webserver
  'db1,db2':
    - match: list
    - database
  webservers:
    - match: nodegroup
    - webserver
  unknown-ng:
    - match: nodegroup
    - common
  'web*':
    - match: glob
    - monitoring
  'app* or db1 or L@mail1,mail2':
    - apps
  'os:Debian':
    - match: grain
    - debian
  'G@os:Debian and web*':
    - templated
  'db*':
    - order: -1
    - 'db.*'
  mail1:
    - badvalues
    - pyrender
  mail2:
    - ignore_missing: True
    - optional
  mail3:
    - missing
    - on
dev:
  '*':
    - devonly
