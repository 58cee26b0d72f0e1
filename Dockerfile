# jetagent: the worker, the submit CLI and the bundled example MCP server in
# one small image that runs as a non-root user. docker compose up builds it
# (docker-compose.yml); docker build -t jetagent . builds it alone.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ \
      ./cmd/worker ./cmd/submit ./examples/mcpserver

# distroless static: no shell, no package manager; uid 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/submit /out/mcpserver /usr/local/bin/
COPY deploy/mcp.json /etc/jetagent/mcp.json
ENV JETAGENT_MCP_CONFIG=/etc/jetagent/mcp.json \
    JETAGENT_METRICS_ADDR=0.0.0.0:9090 \
    JETAGENT_LOG_FORMAT=json
USER nonroot:nonroot
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/worker"]
