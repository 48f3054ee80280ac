# Varnish as the compress-once cache (MODE=cache): gzip the origin's compressible responses
# once when they are fetched (beresp.do_gzip, at -p gzip_level=9), store them, and serve the
# stored gzip (decoded for clients without gzip). Malloc storage, 128 MB.
vcl 4.1;

backend origin {
    .host = "127.0.0.1";
    .port = "@ORIGIN_PORT@";
}

sub vcl_backend_response {
    if (beresp.http.content-type ~ "^(text/|application/(javascript|x-javascript|json|xml)|image/svg\+xml)") {
        set beresp.do_gzip = true;
    }
}
