/* Replaced by the codec sources. */ typedef int weft__codec_placeholder;
