apache:
  port: 0100
  enabled: yes
