package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// TestAClientWithoutAnAddressSaysSo: a client made with no address (a
// configuration left empty) answers every call with ErrUnreachable saying
// what is missing, not "%!w(<nil>)".
func TestAClientWithoutAnAddressSaysSo(t *testing.T) {
	t.Parallel()
	c := client.New(nil)
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"an allow", func() error {
			_, err := c.Allow(ctx, client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 1, Period: time.Second}})
			return err
		}},
		{"the cluster's view", func() error { _, err := c.Cluster(ctx); return err }},
	}
	for _, tt := range calls {
		err := tt.call()
		if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "no node address") || strings.Contains(err.Error(), "%!") {
			t.Errorf("%s: %v, want ErrUnreachable saying the client has no address", tt.name, err)
		}
	}
}
