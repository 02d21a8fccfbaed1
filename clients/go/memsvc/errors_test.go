package memsvc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/duration"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A rate-limited status as the server sends it (memsvc/api/errors.py): the live test cannot
// provoke one without slowing the shared server, so the decoding of RetryInfo is checked here.
func TestErrorFromRPCDecodesEveryDetail(t *testing.T) {
	rateLimited, err := status.New(codes.ResourceExhausted, "this tenant is over its request rate").WithDetails(
		&errdetails.ErrorInfo{Reason: "RATE_LIMITED", Domain: "memsvc.v1", Metadata: map[string]string{"limit": "requests_per_tenant_per_second"}},
		&errdetails.RetryInfo{RetryDelay: &duration.Duration{Seconds: 1, Nanos: 500_000_000}},
		&errdetails.RequestInfo{RequestId: "req-1"},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "user_id", Description: "must not be empty"}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	decoded := errorFromRPC(fmt.Errorf("wrapped: %w", rateLimited.Err()))
	var memsvcErr *Error
	if !errors.As(decoded, &memsvcErr) {
		t.Fatalf("expected *Error, got %T", decoded)
	}
	if memsvcErr.Code != codes.ResourceExhausted || !IsResourceExhausted(decoded) {
		t.Errorf("code %v, want ResourceExhausted", memsvcErr.Code)
	}
	if memsvcErr.Reason != "RATE_LIMITED" || memsvcErr.Domain != "memsvc.v1" || memsvcErr.Metadata["limit"] != "requests_per_tenant_per_second" {
		t.Errorf("ErrorInfo decoded as %q %q %v", memsvcErr.Reason, memsvcErr.Domain, memsvcErr.Metadata)
	}
	if memsvcErr.RetryDelay != 1500*time.Millisecond {
		t.Errorf("retry delay %v, want 1.5s", memsvcErr.RetryDelay)
	}
	if memsvcErr.RequestID != "req-1" {
		t.Errorf("request id %q, want req-1", memsvcErr.RequestID)
	}
	if violation, ok := memsvcErr.Violation("user_id"); !ok || violation.Description != "must not be empty" {
		t.Errorf("violations %v lack user_id", memsvcErr.FieldViolations)
	}
	if status.Code(decoded) != codes.ResourceExhausted || len(memsvcErr.GRPCStatus().Details()) != 4 {
		t.Errorf("GRPCStatus lost the status or its details")
	}
	want := "memsvc: ResourceExhausted (RATE_LIMITED): this tenant is over its request rate; user_id: must not be empty"
	if memsvcErr.Error() != want {
		t.Errorf("Error() = %q, want %q", memsvcErr.Error(), want)
	}
}

func TestErrorOmitsAReasonThatRepeatsTheCode(t *testing.T) {
	invalid, err := status.New(codes.InvalidArgument, "bad request").WithDetails(&errdetails.ErrorInfo{Reason: "INVALID_ARGUMENT"})
	if err != nil {
		t.Fatal(err)
	}
	if text := errorFromRPC(invalid.Err()).Error(); strings.Contains(text, "(") {
		t.Errorf("Error() = %q repeats the code as a reason", text)
	}
}

func TestErrorsWithoutAStatusPassThrough(t *testing.T) {
	plain := errors.New("not from gRPC")
	if errorFromRPC(plain) != plain || errorFromRPC(nil) != nil {
		t.Error("a non-status error or nil was changed")
	}
	if Code(nil) != codes.OK || Code(plain) != codes.Unknown {
		t.Errorf("Code(nil) = %v, Code(plain) = %v", Code(nil), Code(plain))
	}
}
