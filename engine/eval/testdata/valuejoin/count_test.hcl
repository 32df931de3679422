test "a value that changes moves between groups: both are recounted" {
  facts = {
    "desired/service/web"             = {}
    "desired/service/db"              = {}
    "observed/instance/a0001/service" = "web"
    "observed/instance/a0002/service" = "web"
  }
  expect {
    writes = {
      "effective/service/web/instances" = 2
      "effective/service/db/instances"  = 0
    }
  }
  then "a0002 now belongs to db" {
    facts = { "observed/instance/a0002/service" = "db" }
    expect {
      writes = {
        "effective/service/web/instances" = 1
        "effective/service/db/instances"  = 1
      }
    }
  }
  then "a0001 is deleted" {
    delete = ["observed/instance/a0001/service"]
    expect {
      writes = { "effective/service/web/instances" = 0 }
    }
  }
}
