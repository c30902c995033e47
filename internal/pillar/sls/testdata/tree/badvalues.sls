limits:
  max: .inf
  ratio: .nan
ports:
  80: http
flags:
  on: enabled
dup: 1
dup: 2
fine: ok
