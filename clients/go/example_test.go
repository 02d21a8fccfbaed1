// Compile-checked usage of the generated Go stubs: an API key per call, a deadline, a query.
package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	memsvcv1 "github.com/memsvc/memsvc/clients/go/gen/memsvc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func Example() {
	conn, err := grpc.Dial("127.0.0.1:50051", grpc.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+"<api key>")

	writes := memsvcv1.NewWriteServiceClient(conn)
	added, err := writes.AddMemories(ctx, &memsvcv1.AddMemoriesRequest{
		UserId:   "user-1",
		Memories: []*memsvcv1.NewMemory{{Content: "My dog is called Biscuit."}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored", added.GetMemories()[0].GetId())

	queries := memsvcv1.NewQueryServiceClient(conn)
	found, err := queries.Query(ctx, &memsvcv1.QueryRequest{UserId: "user-1", Query: "my dog's name?"})
	if err != nil {
		log.Fatal(err)
	}
	for _, hit := range found.GetMemories() {
		fmt.Printf("%.2f %s\n", hit.GetScore(), hit.GetMemory().GetContent())
	}
}
