# YAML 1.1 scalars as Salt reads them.
flags:
  yes_: yes
  no_: no
  on_: on
  off_: Off
  upper: TRUE
  not_bool: y
  quoted: 'yes'
numbers:
  octal_looking: 010
  signed_octal: -010
  eight: 08
  thousand: 1_000
  sexagesimal: 1:30
  hex: 0x1F
  big: 12345678901234567890123
  negative_big: -98765432109876543210
  float: 1.5
  float_int: 2.
  not_float: 1e3
  time: 1:30.5
nothing: ~
also_nothing:
date: 2001-12-14
motd: welcome
