#!yaml
# Rendered by the yaml renderer alone, so braces are text.
collector:
  template: "{{ not jinja }}"
  interval: 1:00
