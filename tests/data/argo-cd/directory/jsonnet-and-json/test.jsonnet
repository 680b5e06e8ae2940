{"apiVersion": "v1", "kind": "Pod"}
