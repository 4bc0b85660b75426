package signature

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SendGrid Signed Event Webhook: X-Twilio-Email-Event-Webhook-Signature =
// base64 ASN.1 ECDSA P-256 signature over sha256(timestamp + body), timestamp
// from X-Twilio-Email-Event-Webhook-Timestamp. Secrets are the base64 DER
// (SubjectPublicKeyInfo) public keys shown in SendGrid's settings; PEM is
// accepted too. Source: sendgrid/sendgrid-go helpers/eventwebhook.

func init() {
	register(&scheme{
		name: "sendgrid",
		preset: Preset{
			EventID:      "json:sg_event_id",
			EventType:    "json:event",
			RetryHorizon: 24 * time.Hour,
			// SendGrid documents no window and batches events; whether a retry
			// is re-signed is undocumented. A replay within the window is
			// harmless (sg_event_id dedupe), a lost retry is not.
			Tolerance: 24 * time.Hour,
			Batch:     true,
		},
		build: buildSendGrid,
		sign: func(Params, []byte, time.Time, string) (http.Header, []byte, error) {
			return nil, nil, errors.New("cannot sign: the configured secret is SendGrid's public key; only SendGrid holds the private key")
		},
	})
}

const (
	sendgridSigHeader = "X-Twilio-Email-Event-Webhook-Signature"
	sendgridTSHeader  = "X-Twilio-Email-Event-Webhook-Timestamp"
)

type sendgridVerifier struct {
	keys []*ecdsa.PublicKey
	tol  time.Duration
}

// ParseSendGridKey parses a SendGrid verification key: base64 DER SPKI, or PEM.
func ParseSendGridKey(s string) (*ecdsa.PublicKey, error) {
	var der []byte
	if strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN") {
		blk, _ := pem.Decode([]byte(strings.TrimSpace(s)))
		if blk == nil {
			return nil, errors.New("public key PEM does not decode")
		}
		der = blk.Bytes
	} else {
		var err error
		if der, err = base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err != nil {
			return nil, errors.New("public key is neither PEM nor base64 DER")
		}
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("public key is not a DER SubjectPublicKeyInfo")
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("public key is not ECDSA P-256")
	}
	return ec, nil
}

func buildSendGrid(p Params) (Verifier, error) {
	v := &sendgridVerifier{tol: p.Tolerance}
	for i, s := range p.Secrets {
		k, err := ParseSendGridKey(s)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

func (v *sendgridVerifier) Verify(r *Request) error {
	const sc = "sendgrid"
	sigB64, err := header(sc, r.Header, sendgridSigHeader)
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, sendgridTSHeader)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil || len(sig) > 80 { // DER of a P-256 signature is at most 72 bytes
		return fail(sc, ErrMalformed, sendgridSigHeader+" is not a base64 ECDSA signature")
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write(r.Body)
	digest := h.Sum(nil)
	for _, k := range v.keys {
		if ecdsa.VerifyASN1(k, digest, sig) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, sendgridSigHeader+" matches no public key")
}
