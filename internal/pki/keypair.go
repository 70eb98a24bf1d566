package pki

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// reloadCheck is how often a KeyPair looks at its files: at most once per
// interval, on a handshake.
const reloadCheck = time.Second

// KeyPair is a certificate and key read from files and read again when
// the files change, so that a renewed certificate is served without a
// restart. A pair that fails to load (the key written before the
// certificate, say) keeps the previous one until both files agree.
type KeyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
	lastErr error
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadKeyPair reads certFile and keyFile.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	stamp, err := k.stamps()
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: load %s: %w", certFile, err)
	}
	k.cert, k.stamp, k.checked = &pair, stamp, time.Now()
	return k, nil
}

func (k *KeyPair) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, f := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("pki: %w", err)
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

// Certificate returns the current pair, reloading it first when the
// files changed since they were last read.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if now.Sub(k.checked) < reloadCheck {
		return k.cert
	}
	k.checked = now
	stamp, err := k.stamps()
	if err != nil || stamp == k.stamp {
		k.lastErr = err
		return k.cert
	}
	pair, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		k.lastErr = fmt.Errorf("pki: reload %s: %w", k.certFile, err)
		return k.cert
	}
	k.cert, k.stamp, k.lastErr = &pair, stamp, nil
	return k.cert
}

// Err is the last reload failure, nil once the files load again.
func (k *KeyPair) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

// GetCertificate is for tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}
