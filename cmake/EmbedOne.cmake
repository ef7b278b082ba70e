# Writes one data file as a C++ byte array (run by cmake -P at build time).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "extern const unsigned char ${SYMBOL}[] = {${bytes}0x00};\nextern const unsigned long long ${SYMBOL}_size = ${size};\n")
