dev: true
