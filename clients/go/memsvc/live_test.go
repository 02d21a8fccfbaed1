package memsvc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	memsvcv1 "github.com/memsvc/memsvc/clients/go/gen/memsvc/v1"
	"github.com/memsvc/memsvc/clients/go/memsvc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLiveServer drives the client against a running memsvc named by MEMSVC_ADDRESS and
// MEMSVC_API_KEY (tests/e2e/test_go_client.py starts one and sets them); it skips without them.
func TestLiveServer(t *testing.T) {
	address, apiKey := os.Getenv("MEMSVC_ADDRESS"), os.Getenv("MEMSVC_API_KEY")
	if address == "" || apiKey == "" {
		t.Skip("MEMSVC_ADDRESS and MEMSVC_API_KEY are not set")
	}
	ctx := context.Background()
	// The first calls may load the embedding model, hence the generous deadline.
	client, err := memsvc.Dial(ctx, address, apiKey, memsvc.WithTimeout(2*time.Minute))
	if err != nil {
		t.Fatalf("dial %s: %v", address, err)
	}
	defer client.Close()
	run := time.Now().UnixNano()
	userID := fmt.Sprintf("go-e2e-%d", run)
	otherUserID := fmt.Sprintf("go-e2e-other-%d", run)
	defer func() {
		for _, user := range []string{userID, otherUserID} {
			if _, err := client.ForgetUser(ctx, user); err != nil {
				t.Errorf("forget %s: %v", user, err)
			}
		}
	}()

	var dog *memsvcv1.Memory
	t.Run("add then query, get and list find the memory", func(t *testing.T) {
		added, err := client.AddMemories(ctx, userID,
			&memsvcv1.NewMemory{Content: "My dog is a beagle called Biscuit who loves the beach.", Tags: []string{"pets"}},
			&memsvcv1.NewMemory{Content: "I am learning to play the cello on Tuesday evenings."},
		)
		if err != nil {
			t.Fatalf("add memories: %v", err)
		}
		if len(added.GetMemories()) != 2 || added.GetMemories()[0].GetId() == "" {
			t.Fatalf("expected two stored memories with ids, got %v", added.GetMemories())
		}
		dog = added.GetMemories()[0]
		if dog.GetUserId() != userID {
			t.Errorf("the memory belongs to %q, want %q", dog.GetUserId(), userID)
		}
		for i, result := range added.GetResults() {
			if result.GetOutcome() != memsvcv1.WriteOutcome_WRITE_OUTCOME_CREATED {
				t.Errorf("item %d: outcome %v, want created", i, result.GetOutcome())
			}
		}

		found, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: userID, Query: "What is the name of my dog?"})
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		hit := rankedMemory(found, dog.GetId())
		if hit == nil {
			t.Fatalf("the query's results %v miss %s", resultIDs(found), dog.GetId())
		}
		if hit.GetScore() <= 0 || hit.GetScore() > 1 {
			t.Errorf("the hit's score %v is not in (0, 1]", hit.GetScore())
		}

		fetched, err := client.GetMemory(ctx, userID, dog.GetId())
		if err != nil {
			t.Fatalf("get memory: %v", err)
		}
		if fetched.GetContent() != dog.GetContent() || len(fetched.GetTags()) != 1 || fetched.GetTags()[0] != "pets" {
			t.Errorf("got %q %v, want %q [pets]", fetched.GetContent(), fetched.GetTags(), dog.GetContent())
		}

		listed, err := client.ListMemories(ctx, &memsvcv1.ListMemoriesRequest{UserId: userID})
		if err != nil {
			t.Fatalf("list memories: %v", err)
		}
		if len(listed.GetMemories()) != 2 || listed.GetNextPageToken() != "" {
			t.Errorf("listed %d memories (next page %q), want the 2 added", len(listed.GetMemories()), listed.GetNextPageToken())
		}
	})
	if dog == nil {
		t.FailNow()
	}

	t.Run("another user's query does not see the memory", func(t *testing.T) {
		if _, err := client.Add(ctx, otherUserID, "My cat is called Biscuit too."); err != nil {
			t.Fatalf("add for the other user: %v", err)
		}
		found, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: otherUserID, Query: "What is the name of my dog?"})
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		for _, hit := range found.GetMemories() {
			if hit.GetMemory().GetUserId() != otherUserID || hit.GetMemory().GetId() == dog.GetId() {
				t.Errorf("the other user's query returned %s of user %q", hit.GetMemory().GetId(), hit.GetMemory().GetUserId())
			}
		}
		_, err = client.GetMemory(ctx, otherUserID, dog.GetId())
		if !memsvc.IsNotFound(err) {
			t.Errorf("the other user's GetMemory: %v, want NotFound", err)
		}
	})

	t.Run("an empty content is a typed InvalidArgument naming the field", func(t *testing.T) {
		_, err := client.AddMemories(ctx, userID, &memsvcv1.NewMemory{Content: ""})
		var memsvcErr *memsvc.Error
		if !errors.As(err, &memsvcErr) {
			t.Fatalf("expected *memsvc.Error, got %T %v", err, err)
		}
		if memsvcErr.Code != codes.InvalidArgument || !memsvc.IsInvalidArgument(err) {
			t.Errorf("code %v, want InvalidArgument", memsvcErr.Code)
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("status.Code(err) = %v, want InvalidArgument", status.Code(err))
		}
		if memsvcErr.Reason == "" || memsvcErr.Domain == "" {
			t.Errorf("no google.rpc.ErrorInfo: reason %q, domain %q", memsvcErr.Reason, memsvcErr.Domain)
		}
		violation, ok := memsvcErr.Violation("memories[0].content")
		if !ok || violation.Description == "" {
			t.Errorf("no described violation of memories[0].content among %v", memsvcErr.FieldViolations)
		}
		if !strings.Contains(err.Error(), "memories[0].content") {
			t.Errorf("the error text %q does not name the field", err.Error())
		}
	})

	t.Run("an empty user id is a typed InvalidArgument naming user_id", func(t *testing.T) {
		_, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: "", Query: "anything"})
		var memsvcErr *memsvc.Error
		if !errors.As(err, &memsvcErr) || memsvcErr.Code != codes.InvalidArgument {
			t.Fatalf("expected an InvalidArgument *memsvc.Error, got %v", err)
		}
		if _, ok := memsvcErr.Violation("user_id"); !ok {
			t.Errorf("no violation of user_id among %v", memsvcErr.FieldViolations)
		}
	})

	t.Run("a conversation's turn is stored as evidence", func(t *testing.T) {
		added, err := client.AddConversation(ctx, &memsvcv1.AddConversationRequest{
			UserId:    userID,
			SessionId: "s1",
			Turns:     []*memsvcv1.ConversationTurn{{Role: memsvcv1.Role_ROLE_USER, Name: "Ana", Content: "I adopted a greyhound named Pepper."}},
		})
		if err != nil {
			t.Fatalf("add conversation: %v", err)
		}
		if len(added.GetTurns()) != 1 || added.GetTurns()[0].GetContent() != "I adopted a greyhound named Pepper." {
			t.Errorf("stored turns %v, want the one sent", added.GetTurns())
		}
	})

	t.Run("a deleted memory is NotFound", func(t *testing.T) {
		if err := client.DeleteMemory(ctx, userID, dog.GetId()); err != nil {
			t.Fatalf("delete memory: %v", err)
		}
		_, err := client.GetMemory(ctx, userID, dog.GetId())
		if !memsvc.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
	})

	t.Run("an unknown API key is Unauthenticated", func(t *testing.T) {
		stranger, err := memsvc.Dial(ctx, address, "not-a-key")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer stranger.Close()
		_, err = stranger.GetMemory(ctx, userID, dog.GetId())
		if !memsvc.IsUnauthenticated(err) {
			t.Errorf("a call with an unknown key: %v, want Unauthenticated", err)
		}
	})

	t.Run("the default deadline applies to a call without one", func(t *testing.T) {
		hasty, err := memsvc.Dial(ctx, address, apiKey, memsvc.WithTimeout(time.Nanosecond))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer hasty.Close()
		_, err = hasty.Query(ctx, &memsvcv1.QueryRequest{UserId: userID, Query: "my dog"})
		if !memsvc.IsDeadlineExceeded(err) {
			t.Errorf("a call with a 1 ns default deadline: %v, want DeadlineExceeded", err)
		}
	})
}

func rankedMemory(response *memsvcv1.QueryResponse, memoryID string) *memsvcv1.RankedMemory {
	for _, hit := range response.GetMemories() {
		if hit.GetMemory().GetId() == memoryID {
			return hit
		}
	}
	return nil
}

func resultIDs(response *memsvcv1.QueryResponse) []string {
	ids := make([]string, 0, len(response.GetMemories()))
	for _, hit := range response.GetMemories() {
		ids = append(ids, hit.GetMemory().GetId())
	}
	return ids
}
