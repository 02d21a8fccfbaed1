package memsvc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	memsvcv1 "github.com/memsvc/memsvc/clients/go/gen/memsvc/v1"
	"github.com/memsvc/memsvc/clients/go/memsvc"
)

// Compile-checked usage (not run: it needs a server): store a memory, query it, read a typed
// error.
func Example() {
	ctx := context.Background()
	client, err := memsvc.Dial(ctx, "127.0.0.1:50051", "<api key>", memsvc.WithTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	memory, err := client.Add(ctx, "alice", "I prefer window seats on long flights.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored", memory.GetId())

	found, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: "alice", Query: "how do I like to fly?", Limit: 5})
	if err != nil {
		log.Fatal(err)
	}
	for _, hit := range found.GetMemories() {
		fmt.Printf("%.2f %s\n", hit.GetScore(), hit.GetMemory().GetContent())
	}

	_, err = client.AddMemories(ctx, "alice", &memsvcv1.NewMemory{Content: ""})
	var memsvcErr *memsvc.Error
	if errors.As(err, &memsvcErr) {
		for _, violation := range memsvcErr.FieldViolations {
			fmt.Println(memsvcErr.Code, violation.Field, violation.Description)
		}
	}
}
