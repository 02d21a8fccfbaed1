package memsvc

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldViolation is one invalid field of a request (google.rpc.BadRequest.FieldViolation).
type FieldViolation struct {
	// Field is the path to the field in the request message, such as "memories[0].content".
	Field string
	// Description says what is wrong with it.
	Description string
}

// Error is a failed call: the gRPC status code and message, and the google.rpc details the
// server sent with them. Every method of Client returns its failures as *Error; use errors.As to
// read the details, or the Is* helpers to test the code. Errors raised before the server
// answered (no connection, a deadline that passed) carry a code but no details.
//
// *Error implements GRPCStatus, so status.Code(err) and status.FromError(err) work on it too.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Message is the server's status message, without the code in front.
	Message string
	// Reason is the google.rpc.ErrorInfo reason in UPPER_SNAKE_CASE ("INVALID_ARGUMENT",
	// "RATE_LIMITED"); empty without an ErrorInfo. Domain and Metadata come from the same
	// detail.
	Reason   string
	Domain   string
	Metadata map[string]string
	// FieldViolations names each invalid field of the request (google.rpc.BadRequest); empty
	// when there are none.
	FieldViolations []FieldViolation
	// RetryDelay is how long the server asks the caller to wait before retrying
	// (google.rpc.RetryInfo); zero when it did not say.
	RetryDelay time.Duration
	// RequestID is the server's id of the request (google.rpc.RequestInfo), when it sent one.
	RequestID string

	status *status.Status
}

// Error formats the code, the reason when it adds to the code, the message and the invalid
// fields.
func (e *Error) Error() string {
	var text strings.Builder
	text.WriteString("memsvc: ")
	text.WriteString(e.Code.String())
	// The reason adds nothing when it only repeats the code (the server's generic reasons).
	if e.Reason != "" && !strings.EqualFold(strings.ReplaceAll(e.Reason, "_", ""), e.Code.String()) {
		fmt.Fprintf(&text, " (%s)", e.Reason)
	}
	text.WriteString(": ")
	text.WriteString(e.Message)
	for _, violation := range e.FieldViolations {
		fmt.Fprintf(&text, "; %s: %s", violation.Field, violation.Description)
	}
	return text.String()
}

// status.FromError and status.Code find the status of an *Error through this method.
var _ interface{ GRPCStatus() *status.Status } = (*Error)(nil)

// GRPCStatus returns the status the error was made from, details included.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil {
		return status.New(e.Code, e.Message)
	}
	return e.status
}

// Violation returns the violation of one field path, if the server reported one.
func (e *Error) Violation(field string) (FieldViolation, bool) {
	for _, violation := range e.FieldViolations {
		if violation.Field == field {
			return violation, true
		}
	}
	return FieldViolation{}, false
}

// errorFromRPC turns what a gRPC call returned into an *Error with the status details decoded.
// An error that carries no gRPC status is returned as it is.
func errorFromRPC(err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	rpcStatus, ok := statusOf(err)
	if !ok {
		return err
	}
	result := &Error{Code: rpcStatus.Code(), Message: rpcStatus.Message(), status: rpcStatus}
	// Details of types this client does not know, or that do not decode, are skipped, as
	// google.rpc intends.
	for _, detail := range rpcStatus.Details() {
		switch detail := detail.(type) {
		case *errdetails.ErrorInfo:
			result.Reason, result.Domain, result.Metadata = detail.GetReason(), detail.GetDomain(), detail.GetMetadata()
		case *errdetails.BadRequest:
			for _, violation := range detail.GetFieldViolations() {
				result.FieldViolations = append(result.FieldViolations, FieldViolation{
					Field:       violation.GetField(),
					Description: violation.GetDescription(),
				})
			}
		case *errdetails.RetryInfo:
			// Seconds and nanos by hand: the Duration type differs between protobuf API versions.
			delay := detail.GetRetryDelay()
			result.RetryDelay = time.Duration(delay.GetSeconds())*time.Second + time.Duration(delay.GetNanos())
		case *errdetails.RequestInfo:
			result.RequestID = detail.GetRequestId()
		}
	}
	return result
}

// Code returns the gRPC status code of an error returned by Client: codes.OK for nil and
// codes.Unknown for an error without a status.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if rpcStatus, ok := statusOf(err); ok {
		return rpcStatus.Code()
	}
	return codes.Unknown
}

// statusOf finds the gRPC status in an error's chain (status.FromError of this gRPC version
// looks only at the error itself, not at what it wraps).
func statusOf(err error) (*status.Status, bool) {
	var withStatus interface{ GRPCStatus() *status.Status }
	if errors.As(err, &withStatus) {
		return withStatus.GRPCStatus(), true
	}
	return nil, false
}

// IsInvalidArgument reports whether the request was invalid; the *Error's FieldViolations
// name the fields.
func IsInvalidArgument(err error) bool { return Code(err) == codes.InvalidArgument }

// IsNotFound reports whether the memory (or user) does not exist.
func IsNotFound(err error) bool { return Code(err) == codes.NotFound }

// IsUnauthenticated reports whether the API key is missing, unknown, revoked or expired.
func IsUnauthenticated(err error) bool { return Code(err) == codes.Unauthenticated }

// IsPermissionDenied reports whether the API key may not make this call.
func IsPermissionDenied(err error) bool { return Code(err) == codes.PermissionDenied }

// IsResourceExhausted reports whether a quota or rate limit was hit; the *Error's RetryDelay
// says when to come back, if the server said.
func IsResourceExhausted(err error) bool { return Code(err) == codes.ResourceExhausted }

// IsUnavailable reports whether the service could not answer now; idempotent calls may be
// retried after the *Error's RetryDelay.
func IsUnavailable(err error) bool { return Code(err) == codes.Unavailable }

// IsDeadlineExceeded reports whether the call's deadline passed before it finished.
func IsDeadlineExceeded(err error) bool { return Code(err) == codes.DeadlineExceeded }
