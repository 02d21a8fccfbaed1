// Package memsvc is a client of the memsvc memory service: it dials with an API key, gives every
// call a deadline, and returns failures as *Error with the server's google.rpc details decoded
// (the invalid fields of a request, the reason, how long to wait before retrying).
//
// Requests and responses are the generated messages of package memsvcv1
// (github.com/memsvc/memsvc/clients/go/gen/memsvc/v1):
//
//	client, err := memsvc.Dial(ctx, "127.0.0.1:50051", apiKey)
//	if err != nil { ... }
//	defer client.Close()
//	memory, err := client.Add(ctx, "alice", "I prefer window seats.")
//	found, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: "alice", Query: "how do I like to fly?"})
package memsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	memsvcv1 "github.com/memsvc/memsvc/clients/go/gen/memsvc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// Version is the version of this client, sent in the user agent.
const Version = "0.1.0"

// DefaultTimeout is the deadline of a call whose context has none, unless WithTimeout changes it.
const DefaultTimeout = 10 * time.Second

// Option configures Dial.
type Option func(*settings)

type settings struct {
	timeout     time.Duration
	tlsConfig   *tls.Config
	dialOptions []grpc.DialOption
}

// WithTimeout sets the deadline given to a call whose context has none (DefaultTimeout
// otherwise). Zero or less gives such calls no deadline. A context's own deadline always wins.
func WithTimeout(timeout time.Duration) Option {
	return func(s *settings) { s.timeout = timeout }
}

// WithTLS dials over TLS with the given configuration; nil verifies the server against the
// system's trust store. Without it the connection is plaintext, as for a local server.
func WithTLS(config *tls.Config) Option {
	return func(s *settings) {
		if config == nil {
			config = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		s.tlsConfig = config
	}
}

// WithDialOptions passes further options to grpc.DialContext, such as grpc.WithBlock() to wait
// for the connection (bounded by Dial's context) or keepalive parameters.
func WithDialOptions(options ...grpc.DialOption) Option {
	return func(s *settings) { s.dialOptions = append(s.dialOptions, options...) }
}

// Client calls memsvc's WriteService and QueryService. It is safe for concurrent use; create one
// per process and Close it when done.
type Client struct {
	conn   *grpc.ClientConn
	writes memsvcv1.WriteServiceClient
	reads  memsvcv1.QueryServiceClient
}

// Dial connects to the memsvc server at address (host:port, or any gRPC target) with an API key,
// which is sent with every call as `authorization: Bearer <key>`; the key alone decides the
// tenant, project and environment of each call. Like grpc.DialContext it does not wait for the
// connection unless grpc.WithBlock() is passed through WithDialOptions; ctx bounds that wait.
func Dial(ctx context.Context, address, apiKey string, options ...Option) (*Client, error) {
	if strings.TrimSpace(address) == "" {
		return nil, errors.New("memsvc: address must be host:port (or any gRPC target), got an empty string")
	}
	if apiKey == "" {
		return nil, errors.New("memsvc: the API key must not be empty")
	}
	config := settings{timeout: DefaultTimeout}
	for _, option := range options {
		option(&config)
	}
	transport := grpc.WithInsecure()
	if config.tlsConfig != nil {
		transport = grpc.WithTransportCredentials(credentials.NewTLS(config.tlsConfig))
	}
	dialOptions := append([]grpc.DialOption{
		transport,
		grpc.WithPerRPCCredentials(apiKeyCredentials{header: "Bearer " + apiKey}),
		grpc.WithUserAgent("memsvc-client-go/" + Version),
		grpc.WithUnaryInterceptor(unaryInterceptor(config.timeout)),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(protoCodec{})),
	}, config.dialOptions...)
	conn, err := grpc.DialContext(ctx, address, dialOptions...)
	if err != nil {
		return nil, fmt.Errorf("memsvc: dial %s: %w", address, err)
	}
	return &Client{
		conn:   conn,
		writes: memsvcv1.NewWriteServiceClient(conn),
		reads:  memsvcv1.NewQueryServiceClient(conn),
	}, nil
}

// Close closes the connection; calls in flight are cancelled and the client is unusable after.
func (c *Client) Close() error {
	return c.conn.Close()
}

// WriteService returns the generated WriteService stub on the client's connection, for the
// methods this client does not wrap (UpdateMemory, Feedback, GetMemoryHistory, ExportMemories,
// ImportMemories). Its unary calls carry the API key, get the default deadline and return *Error
// as the client's methods do; its streams carry the API key.
func (c *Client) WriteService() memsvcv1.WriteServiceClient { return c.writes }

// QueryService returns the generated QueryService stub on the client's connection.
func (c *Client) QueryService() memsvcv1.QueryServiceClient { return c.reads }

// AddMemories stores memories for one user and returns them as stored, in the order given, with
// what the server did with each (created, an idempotent replay, or a confirmed existing memory).
func (c *Client) AddMemories(ctx context.Context, userID string, memories ...*memsvcv1.NewMemory) (*memsvcv1.AddMemoriesResponse, error) {
	return c.writes.AddMemories(ctx, &memsvcv1.AddMemoriesRequest{UserId: userID, Memories: memories})
}

// Add stores one memory with only its content and returns it as stored. Use AddMemories for the
// other fields of a memory (kind, tags, importance, idempotency key).
func (c *Client) Add(ctx context.Context, userID, content string) (*memsvcv1.Memory, error) {
	response, err := c.AddMemories(ctx, userID, &memsvcv1.NewMemory{Content: content})
	if err != nil {
		return nil, err
	}
	if len(response.GetMemories()) != 1 {
		return nil, &Error{Code: codes.Internal, Message: fmt.Sprintf("the server returned %d memories for one", len(response.GetMemories()))}
	}
	return response.GetMemories()[0], nil
}

// AddConversation hands memsvc a session's new turns: each is stored as evidence, and the
// memories the turns state and the session's summary are derived from them. Resending turns
// (the same session and turn indexes) stores nothing twice.
func (c *Client) AddConversation(ctx context.Context, request *memsvcv1.AddConversationRequest) (*memsvcv1.AddConversationResponse, error) {
	return c.writes.AddConversation(ctx, request)
}

// Query returns the memories of request.UserId that matter for request.Query, best first, with
// the signals behind each score and a report of the retrieval. Zero fields leave the server's
// defaults (limit 10, direct mode, the server's relevance floor).
func (c *Client) Query(ctx context.Context, request *memsvcv1.QueryRequest) (*memsvcv1.QueryResponse, error) {
	return c.reads.Query(ctx, request)
}

// GetMemory returns one memory of a user; IsNotFound(err) when it does not exist.
func (c *Client) GetMemory(ctx context.Context, userID, memoryID string) (*memsvcv1.Memory, error) {
	response, err := c.writes.GetMemory(ctx, &memsvcv1.GetMemoryRequest{UserId: userID, Id: memoryID})
	if err != nil {
		return nil, err
	}
	if response.GetMemory() == nil {
		return nil, &Error{Code: codes.Internal, Message: "the server returned no memory"}
	}
	return response.GetMemory(), nil
}

// ListMemories returns one page of request.UserId's memories, newest first; pass the response's
// NextPageToken back as request.PageToken for the next page (empty on the last one).
func (c *Client) ListMemories(ctx context.Context, request *memsvcv1.ListMemoriesRequest) (*memsvcv1.ListMemoriesResponse, error) {
	return c.writes.ListMemories(ctx, request)
}

// DeleteMemory removes one memory: its record, its vector and every cached result naming it.
func (c *Client) DeleteMemory(ctx context.Context, userID, memoryID string) error {
	_, err := c.writes.DeleteMemory(ctx, &memsvcv1.DeleteMemoryRequest{UserId: userID, Id: memoryID})
	return err
}

// ForgetUser erases everything of one user, the user's data key included, and returns how many
// memories were erased.
func (c *Client) ForgetUser(ctx context.Context, userID string) (int64, error) {
	response, err := c.writes.ForgetUser(ctx, &memsvcv1.ForgetUserRequest{UserId: userID})
	if err != nil {
		return 0, err
	}
	return response.GetDeletedCount(), nil
}

// unaryInterceptor gives a call without a deadline the default one and turns its failure into
// an *Error, so that the raw stubs of WriteService and QueryService behave as Client's methods.
func unaryInterceptor(timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, request, reply interface{}, conn *grpc.ClientConn, invoker grpc.UnaryInvoker, options ...grpc.CallOption) error {
		if _, hasDeadline := ctx.Deadline(); !hasDeadline && timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return errorFromRPC(invoker(ctx, method, request, reply, conn, options...))
	}
}

// apiKeyCredentials sends the API key as the authorization metadata of every call.
type apiKeyCredentials struct {
	header string
}

func (k apiKeyCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": k.header}, nil
}

// RequireTransportSecurity is false so that a plaintext connection to a local server works;
// use WithTLS for a server across a network.
func (apiKeyCredentials) RequireTransportSecurity() bool { return false }
