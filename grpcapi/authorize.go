package grpcapi

import (
	"context"
	"errors"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// roleOf is the role a method needs: "" for the open health service.
func roleOf(fullMethod string) auth.Role {
	switch {
	case strings.HasPrefix(fullMethod, "/"+healthpb.Health_ServiceDesc.ServiceName+"/"):
		return ""
	case strings.HasPrefix(fullMethod, "/"+ratelimitv3.RateLimitService_ServiceDesc.ServiceName+"/"):
		return auth.RoleDecide
	default: // reflection, and anything registered later
		return auth.RoleRead
	}
}

// authorizeCall checks the call's bearer token against the role its method
// needs; a call to a method that needs a role and is let through proves its
// caller (Options.Proven). The token never reaches a log or an answer.
func (s *Server) authorizeCall(ctx context.Context, fullMethod string) error {
	role := roleOf(fullMethod)
	if role == "" {
		return nil
	}
	if s.opts.Authorizer == nil {
		s.proven(ctx)
		return nil
	}
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	_, err := s.opts.Authorizer.Authorize(auth.BearerToken(header), role)
	switch {
	case err == nil:
		s.proven(ctx)
		return nil
	case errors.Is(err, auth.ErrPermissionDenied):
		return status.Errorf(codes.PermissionDenied, "this token lacks the %s role that %s needs", role, fullMethod)
	case errors.Is(err, auth.ErrUnknownToken):
		return status.Error(codes.Unauthenticated, "the bearer token given matches none of this cluster's tokens: check it (the -auth file lists the SHA-256 of each)")
	case header != "":
		return status.Error(codes.Unauthenticated, `the authorization metadata holds no bearer token: write it "authorization: Bearer <token>"`)
	default:
		return status.Error(codes.Unauthenticated, `this call needs a bearer token: metadata "authorization: Bearer <token>"`)
	}
}

// proven tells Options.Proven, when set, that the call's caller is proven.
func (s *Server) proven(ctx context.Context) {
	if s.opts.Proven != nil {
		s.opts.Proven(ctx)
	}
}

func (s *Server) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.authorizeCall(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.authorizeCall(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
