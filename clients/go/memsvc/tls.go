package memsvc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSConfigFromFiles builds the configuration for WithTLS from PEM files: the server's certificate
// is verified against caFile (the system trust store when it is empty), and certFile and keyFile,
// given together, are this client's certificate for a server that requires one (mutual TLS).
// Set ServerName on the result when the address does not carry the name in the server's
// certificate (a port-forward to 127.0.0.1).
func TLSConfigFromFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("memsvc: the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("memsvc: %s holds no PEM certificate", caFile)
		}
		config.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("memsvc: a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("memsvc: the client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}
