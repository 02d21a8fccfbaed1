package memsvc_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	memsvcv1 "github.com/memsvc/memsvc/clients/go/gen/memsvc/v1"
	"github.com/memsvc/memsvc/clients/go/memsvc"
)

// TestTLSLiveServer drives the client against a memsvc serving mutual TLS, named by
// MEMSVC_ADDRESS and MEMSVC_API_KEY, with the CA and a client certificate in MEMSVC_CA_FILE,
// MEMSVC_CLIENT_CERT_FILE and MEMSVC_CLIENT_KEY_FILE (tests/e2e/test_tls_clients.py starts
// such a server and sets them); it skips without them.
func TestTLSLiveServer(t *testing.T) {
	address, apiKey := os.Getenv("MEMSVC_ADDRESS"), os.Getenv("MEMSVC_API_KEY")
	caFile, certFile, keyFile := os.Getenv("MEMSVC_CA_FILE"), os.Getenv("MEMSVC_CLIENT_CERT_FILE"), os.Getenv("MEMSVC_CLIENT_KEY_FILE")
	if address == "" || apiKey == "" || caFile == "" || certFile == "" || keyFile == "" {
		t.Skip("MEMSVC_ADDRESS, MEMSVC_API_KEY, MEMSVC_CA_FILE, MEMSVC_CLIENT_CERT_FILE and MEMSVC_CLIENT_KEY_FILE are not all set")
	}
	ctx := context.Background()

	t.Run("with the CA and a client certificate, add then query finds the memory", func(t *testing.T) {
		config, err := memsvc.TLSConfigFromFiles(caFile, certFile, keyFile)
		if err != nil {
			t.Fatalf("TLS configuration: %v", err)
		}
		client, err := memsvc.Dial(ctx, address, apiKey, memsvc.WithTLS(config), memsvc.WithTimeout(2*time.Minute))
		if err != nil {
			t.Fatalf("dial %s: %v", address, err)
		}
		defer client.Close()
		userID := fmt.Sprintf("go-tls-%d", time.Now().UnixNano())
		defer client.ForgetUser(ctx, userID)
		memory, err := client.Add(ctx, userID, "My sister Imogen lives in Porto and teaches the violin.")
		if err != nil {
			t.Fatalf("add: %v", err)
		}
		found, err := client.Query(ctx, &memsvcv1.QueryRequest{UserId: userID, Query: "Where does my sister live?"})
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if rankedMemory(found, memory.GetId()) == nil {
			t.Errorf("the query's results %v miss %s", resultIDs(found), memory.GetId())
		}
	})

	t.Run("without a client certificate the handshake is refused", func(t *testing.T) {
		config, err := memsvc.TLSConfigFromFiles(caFile, "", "")
		if err != nil {
			t.Fatalf("TLS configuration: %v", err)
		}
		client, err := memsvc.Dial(ctx, address, apiKey, memsvc.WithTLS(config), memsvc.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer client.Close()
		if _, err := client.Add(ctx, "go-tls-refused", "never stored"); !memsvc.IsUnavailable(err) {
			t.Errorf("a call without a client certificate: %v, want Unavailable", err)
		}
	})

	t.Run("plaintext is refused", func(t *testing.T) {
		client, err := memsvc.Dial(ctx, address, apiKey, memsvc.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer client.Close()
		if _, err := client.Add(ctx, "go-tls-refused", "never stored"); !memsvc.IsUnavailable(err) {
			t.Errorf("a plaintext call: %v, want Unavailable", err)
		}
	})

	t.Run("bad TLS files are errors", func(t *testing.T) {
		if _, err := memsvc.TLSConfigFromFiles(caFile+".missing", "", ""); err == nil {
			t.Error("a missing CA file gave no error")
		}
		if _, err := memsvc.TLSConfigFromFiles(keyFile, "", ""); err == nil {
			t.Error("a CA file holding no certificate gave no error")
		}
		if _, err := memsvc.TLSConfigFromFiles(caFile, certFile, ""); err == nil {
			t.Error("a certificate without its key gave no error")
		}
	})
}
