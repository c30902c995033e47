users:
  alice: {uid: 1000}
