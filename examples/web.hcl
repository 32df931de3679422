# The service of the key schema's worked example: three nginx instances
# serving port 8080.
#
#   ccattler apply -f examples/web.hcl
service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080]
}
