package memsvc

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// protoCodec encodes the client's messages with google.golang.org/protobuf. gRPC's default codec
// goes through github.com/golang/protobuf, and the 1.3 line of it (which Debian's grpc package
// accepts, and installs by default) cannot decode the messages protoc-gen-go generates today: a
// reply panics in its table unmarshaller. This codec works whichever line the build has.
type protoCodec struct{}

func (protoCodec) Marshal(value interface{}) ([]byte, error) {
	message, ok := value.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("memsvc: cannot encode %T: not a protobuf message", value)
	}
	return proto.Marshal(message)
}

func (protoCodec) Unmarshal(data []byte, value interface{}) error {
	message, ok := value.(proto.Message)
	if !ok {
		return fmt.Errorf("memsvc: cannot decode into %T: not a protobuf message", value)
	}
	return proto.Unmarshal(data, message)
}

// Name is the content-subtype the server expects: application/grpc+proto.
func (protoCodec) Name() string { return "proto" }
