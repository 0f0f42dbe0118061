/* Replaced by the transport sources. */ typedef int weft__transport_placeholder;
