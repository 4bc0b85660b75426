package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// twilioDoc signs as Twilio's documentation describes, written apart from
// the verifier: the full URL Twilio called, then each POST parameter's name
// and value, sorted by name; HMAC-SHA1 with the auth token, base64.
func twilioDoc(token, fullURL string, params [][2]string) string {
	sorted := append([][2]string(nil), params...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i][0] < sorted[j][0] })
	data := fullURL
	for _, kv := range sorted {
		data += kv[0] + kv[1]
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// A public_url holding a query is the exact URL configured at Twilio, and
// the request arrives with that query: it is checked once, not appended to
// itself. Twilio's own example (auth token 12345, the URL with ?foo=1&bar=2)
// and its JSON form (bodySHA256 appended to the configured query) verify as
// the receiver passes them: the request URI, origin-form.
func TestTwilioPublicURLWithQuery(t *testing.T) {
	const public = "https://mycompany.com/myapp.php?foo=1&bar=2"
	params := [][2]string{{"CallSid", "CA1234567890ABCDE"}, {"Caller", "+14158675309"}, {"Digits", "1234"},
		{"From", "+14158675309"}, {"To", "+18005551212"}}
	sig := twilioDoc("12345", public, params)
	if sig != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" { // the value in Twilio's SDK tests
		t.Fatalf("documented algorithm gives %s", sig)
	}
	body := "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"
	v, err := New(Params{Scheme: "twilio", Secrets: []string{"12345"}, PublicURL: public})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Twilio-Signature": {sig}}
	if err := v.Verify(&Request{Header: h, Body: []byte(body), URL: "/myapp.php?foo=1&bar=2"}); err != nil {
		t.Fatalf("form request to the configured URL: %v", err)
	}
	// Twilio appends bodySHA256 to the configured URL's query.
	jsonBody := `{"property": "value", "boolean": true}`
	const q = "foo=1&bar=2&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	hj := http.Header{"X-Twilio-Signature": {twilioDoc("12345", "https://mycompany.com/myapp.php?"+q, nil)}}
	if hj.Get("X-Twilio-Signature") != "a9nBmqA0ju/hNViExpshrM61xv4=" {
		t.Fatalf("documented algorithm gives %s for the JSON vector", hj.Get("X-Twilio-Signature"))
	}
	if err := v.Verify(&Request{Header: hj, Body: []byte(jsonBody), URL: "/myapp.php?" + q}); err != nil {
		t.Fatalf("JSON request to the configured URL: %v", err)
	}
	// Both have a query: the request's is what Twilio called and signed.
	other := twilioDoc("12345", "https://mycompany.com/myapp.php?foo=3", params)
	if err := v.Verify(&Request{Header: http.Header{"X-Twilio-Signature": {other}}, Body: []byte(body), URL: "/myapp.php?foo=3"}); err != nil {
		t.Fatalf("request with another query: %v", err)
	}
	// public_url's query is not a licence for another: the request that
	// names none is checked against public_url as written...
	if err := v.Verify(&Request{Header: h, Body: []byte(body), URL: "/myapp.php"}); err != nil {
		t.Fatalf("request without its query: %v", err)
	}
	// ...and a signature for the configured query does not cover another.
	if err := v.Verify(&Request{Header: h, Body: []byte(body), URL: "/myapp.php?foo=1&bar=3"}); err == nil {
		t.Fatal("signature of ?foo=1&bar=2 accepted for ?foo=1&bar=3")
	}
}

// Every re-encoding of one signed form body verifies with the same signature,
// and Verify hands out one replay key for all of them (the URL's default
// port written or not included); another body, another query, or a JSON
// body (whose bytes are signed through bodySHA256) key differently.
func TestTwilioSignedKeyIsCanonical(t *testing.T) {
	const public = "https://hooks.example.com/hooks/tw"
	p := Params{Scheme: "twilio", Secrets: []string{"tok"}, PublicURL: public}
	v, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	const body = "AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered"
	key := func(sigURL, reqURL, b string) ([32]byte, error) {
		t.Helper()
		params, err := twilioParams([]byte(b))
		if err != nil {
			t.Fatal(err)
		}
		sig := string(b64Of(mac(sha1.New, []byte("tok"), []byte(sigURL), params)))
		r := &Request{Header: http.Header{"X-Twilio-Signature": {sig}}, Body: []byte(b), URL: reqURL}
		if err := v.Verify(r); err != nil {
			return [32]byte{}, err
		}
		if r.Signed == nil {
			t.Fatalf("%q: no Signed key", b)
		}
		return r.SignedSHA256(), nil
	}
	want, err := key(public, "/hooks/tw", body)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{
		"MessageStatus=delivered&AccountSid=AC1&MessageSid=SM1",
		"AccountSid=AC1&MessageSid=SM1&MessageStatus=%64elivered",
		body + "&MessageStatus=delivered",
		body + "&",
		"&&" + body,
		"AccountSid=AC1MessageSidSM1&MessageStatus=delivered",
		"Account%53id=AC1&MessageSid=SM1&MessageStatus=delivered",
	} {
		got, err := key(public, "/hooks/tw", b)
		if err != nil || got != want {
			t.Errorf("%q: key differs (err %v)", b, err)
		}
	}
	if got, err := key("https://hooks.example.com:443/hooks/tw", "/hooks/tw", body); err != nil || got != want {
		t.Errorf("signed with :443: key differs (err %v)", err)
	}
	if got, err := key(public, "/hooks/tw", strings.Replace(body, "delivered", "failed", 1)); err != nil || got == want {
		t.Errorf("another status: same key (err %v)", err)
	}
	if got, err := key(public+"?x=1", "/hooks/tw?x=1", body); err != nil || got == want {
		t.Errorf("another query: same key (err %v)", err)
	}
	// JSON: the raw bytes are signed (their hash is in the URL).
	jb := []byte(`{"a":1}`)
	h := sha256.Sum256(jb)
	sum := hexOf(h[:])
	ju := public + "?bodySHA256=" + string(sum)
	r := &Request{Header: http.Header{"X-Twilio-Signature": {string(b64Of(mac(sha1.New, []byte("tok"), []byte(ju))))}},
		Body: jb, URL: "/hooks/tw?bodySHA256=" + string(sum)}
	if err := v.Verify(r); err != nil || r.Signed != nil {
		t.Fatalf("JSON body: err %v, Signed %v (want the raw bytes' hash)", err, r.Signed)
	}
}
