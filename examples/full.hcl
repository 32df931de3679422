# Every attribute a service or volume file may hold. Each becomes one fact
# under desired/service/web/... or desired/volume/data/...; `ccattler facts
# schema` lists their keys and types.
service "web" {
  image     = "nginx:1.28"
  instances = 3             # also the user's intent: intent/user/service/web/instances
  expose    = [8080, 8443]  # one desired/service/web/expose/{port} fact each
  volume    = "data"        # mounted at /volumes/data; a single-node volume pins the instances

  resources { cpu = 0.5  memory = "256Mi" }                      # cpu also as "500m"
  health    { method = "GET"  path = "/healthz"  interval = "10s"  failures = 3 } # method: GET, HEAD or TCP; replaced after 3 failed checks in a row
  autoscale { metric = "cpu"  threshold = 0.7  min = 2  max = 10  stabilization = "300s" } # scale down after 300s below

  placement { architecture = "amd64"  zone = "eu-1a" }
  update    { max_unavailable = 1  max_extra = 1 }              # rolling replacement limits
}

volume "data" { size = "10Gi"  persistent = true  access_mode = "single-node" }
