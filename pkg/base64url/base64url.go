// Package base64url decodes the one canonical spelling of unpadded
// base64url (RFC 4648 §5), the encoding of a compact JWS's segments. hcc-api
// (pkg/api) and the Control API client (pkg/controlapi) verify tokens with
// it.
//
// It is a leaf of its own rather than part of pkg/strictjson: a segment is
// base64url before it is JSON, and the signature segment is never JSON.
package base64url

import "encoding/base64"

// DecodeCanonical decodes s if s is the one unpadded base64url spelling of
// its bytes. The last character of most segments also carries 2 or 4 unused
// bits; a lenient decoder ignores them, so up to 256 spellings of one token
// would verify. Strict decoding refuses padding and non-zero unused bits;
// re-encoding also refuses the CR and LF that the decoder skips even in
// strict mode. The empty string is refused: no segment of a token is empty.
func DecodeCanonical(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	decoded, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(decoded) != s {
		return nil, false
	}
	return decoded, true
}
