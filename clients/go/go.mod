module github.com/memsvc/memsvc/clients/go

go 1.19

// The versions Debian 12 ships (golang-google-grpc-dev, golang-google-protobuf-dev), and the
// genproto and golang/protobuf that grpc v1.33.3 requires. tools/build_go_client.sh builds offline
// in GOPATH mode against Debian's sources; a module build elsewhere resolves these through the
// module proxy (`go mod tidy` writes go.sum).
require (
	github.com/golang/protobuf v1.4.1
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
