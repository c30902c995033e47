apps:
  - name: shop
    replicas: 3
