// Command middleware is a service whose routes are limited per user by a
// limitnode cluster: its own authentication (an HS256 JWT here) puts the
// user in the request's context, and the limiter keys each route's quota by
// that user. Run three of it against one cluster and they hold one limit.
//
//	go run ./examples/middleware -listen 127.0.0.1:8091 -secret s3cret 127.0.0.1:7001
//	go run ./examples/middleware -secret s3cret -token-for alice    # prints a token for alice, valid an hour
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/middleware"
)

type userKey struct{}

func main() {
	listen := flag.String("listen", "127.0.0.1:8091", "address to serve on")
	secret := flag.String("secret", "", "HMAC key of the HS256 tokens")
	tokenFor := flag.String("token-for", "", "print a token for this user, valid an hour, and exit")
	flag.Parse()
	if *tokenFor != "" {
		fmt.Println(signHS256([]byte(*secret), *tokenFor, time.Now().Add(time.Hour)))
		return
	}
	guard := client.NewGuard(client.New(nil, flag.Args()...), client.GuardOptions{OnFailure: client.FailClosed})

	user := middleware.Join(middleware.Const("user"), middleware.FromContext(func(ctx context.Context) (string, bool) {
		sub, ok := ctx.Value(userKey{}).(string)
		return sub, ok
	}))
	perUser := &client.Limit{Rate: 100, Period: time.Minute}
	global := middleware.Check{Key: middleware.Const("all-users"), Limit: &client.Limit{Rate: 10000, Period: time.Minute}}
	mux := http.NewServeMux()
	limiter, err := middleware.New(guard, middleware.Options{
		Mux: mux,
		Routes: map[string][]middleware.Check{
			"POST /export":      {{Key: user, Limit: perUser, Cost: 10}, global}, // a heavier quota on exports
			"GET /reports/{id}": {{Key: user, Limit: perUser}, global},           // every report is one route
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux.HandleFunc("POST /export", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "export started") })
	mux.HandleFunc("GET /reports/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "report", r.PathValue("id")) })

	ln, err := net.Listen("tcp", *listen) // with port 0, one the OS picks, named below
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", ln.Addr())
	log.Fatal(http.Serve(ln, authenticate([]byte(*secret), limiter.Wrap(mux))))
}

// authenticate puts the subject of a valid "Authorization: Bearer <JWT>"
// (HS256, not expired) in the request's context; the limiter answers 401
// to a request without one. A real service would use its JWT library.
func authenticate(secret []byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if sub, ok := verifyHS256(secret, token); ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, sub))
		}
		next.ServeHTTP(w, r)
	})
}

func verifyHS256(secret []byte, token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	var header struct{ Alg string }
	var claims struct {
		Sub string
		Exp int64
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) || decode(parts[0], &header) != nil || header.Alg != "HS256" ||
		decode(parts[1], &claims) != nil || claims.Sub == "" || time.Now().Unix() >= claims.Exp {
		return "", false
	}
	return claims.Sub, true
}

// signHS256 makes the token verifyHS256 accepts until exp.
func signHS256(secret []byte, sub string, exp time.Time) string {
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"sub": sub, "exp": exp.Unix()})
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func decode(part string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
