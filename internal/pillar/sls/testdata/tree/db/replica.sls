db:
  role: replica
  lag_ok: 1_000
