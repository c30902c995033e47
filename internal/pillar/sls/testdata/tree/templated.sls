# Jinja further down.
packages:
{% for p in ['vim', 'git'] %}
  - {{ p }}
{% endfor %}
