package main

import (
	"context"
	"io"
)

func runPlayerScale(ctx context.Context, args []string, w io.Writer) error { return nil }
