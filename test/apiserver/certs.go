package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// clusterCerts are the files of the cluster mode's CA and serving
// certificate, in <dir>/certs.
type clusterCerts struct {
	CACert, CAKey, ServingCert, ServingKey string
}

func certFiles(dir string) clusterCerts {
	d := filepath.Join(dir, "certs")
	return clusterCerts{
		CACert: filepath.Join(d, "ca.crt"), CAKey: filepath.Join(d, "ca.key"),
		ServingCert: filepath.Join(d, "serving.crt"), ServingKey: filepath.Join(d, "serving.key"),
	}
}

// servingDNSNames are the names in-cluster clients reach the API server by.
var servingDNSNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local", "localhost"}

// writeClusterCerts writes a new CA and a serving certificate it signs,
// valid for ips and servingDNSNames, to certFiles(dir). The serving
// certificate file holds the CA after the leaf, as kube-apiserver's
// --tls-cert-file allows.
func writeClusterCerts(dir string, ips []net.IP) (clusterCerts, error) {
	f := certFiles(dir)
	if err := os.MkdirAll(filepath.Dir(f.CACert), 0o755); err != nil {
		return f, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "e2e-kubernetes-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     servingDNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return f, fmt.Errorf("serving certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(f.CACert, caPEM, 0o644); err != nil {
		return f, err
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...)
	if err := os.WriteFile(f.ServingCert, chain, 0o644); err != nil {
		return f, err
	}
	for path, k := range map[string]*ecdsa.PrivateKey{f.CAKey: caKey, f.ServingKey: key} {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return f, err
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}
