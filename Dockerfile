# The Sluice image: the static binary that `make image` builds on the host
# (CGO_ENABLED=0), in an empty image. Configure it through the environment:
# every `sluice serve` flag has a SLUICE_* twin.
FROM scratch
COPY bin/sluice /sluice
USER 65532:65532
ENV SLUICE_GRPC_ADDR=:8081 \
    SLUICE_HTTP_ADDR=:8080 \
    SLUICE_PEER_ADDR=:8082 \
    SLUICE_GOSSIP_ADDR=0.0.0.0:7946 \
    SLUICE_LOG_FORMAT=json
EXPOSE 8080/tcp 8081/tcp 8082/tcp 7946/tcp 7946/udp
ENTRYPOINT ["/sluice", "serve"]
