package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certReloader serves the TLS certificate in certFile/keyFile and picks up a new one without
// a restart: at a handshake at most once a second it looks at the files' modification times
// and, when either changed, loads the pair again (a pair that does not load — a half-written
// renewal — is logged and the old certificate kept until the next change).
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time
	checked time.Time
}

func newCertReloader(certFile, keyFile string, logger *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.checked = &cert, r.stamps(), time.Now()
	return r, nil
}

func (r *certReloader) stamps() [2]time.Time {
	var out [2]time.Time
	for i, f := range []string{r.certFile, r.keyFile} {
		if st, err := os.Stat(f); err == nil {
			out[i] = st.ModTime()
		}
	}
	return out
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= time.Second {
		r.checked = time.Now()
		if st := r.stamps(); st != r.stamp {
			cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
			if err != nil {
				r.logger.Warn("TLS certificate changed but does not load; serving the previous one", "cert", r.certFile, "err", err)
			} else {
				r.cert = &cert
				r.logger.Info("TLS certificate reloaded", "cert", r.certFile)
			}
			r.stamp = st
		}
	}
	return r.cert, nil
}

// Reload loads the pair again whatever the files' times say (SIGHUP): a pair that loads
// replaces the served one, and the log says whether the certificate changed and what it now
// is; one that does not load is logged and the served certificate kept.
func (r *certReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked, r.stamp = time.Now(), r.stamps()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.logger.Warn("reload: the TLS certificate does not load; serving the previous one", "cert", r.certFile, "key", r.keyFile, "err", err)
		return fmt.Errorf("TLS certificate: %w", err)
	}
	if len(cert.Certificate) > 0 && len(r.cert.Certificate) > 0 && bytes.Equal(cert.Certificate[0], r.cert.Certificate[0]) {
		r.logger.Info("reload: TLS certificate unchanged", "cert", r.certFile)
		return nil
	}
	attrs := []any{"cert", r.certFile}
	if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
		attrs = append(attrs, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	r.cert = &cert
	r.logger.Info("reload: TLS certificate changed", attrs...)
	return nil
}
