# qm_embed_text.cmake — turn a text file into a C source that returns it from one function.
# Run at build time: cmake -DIN=<text file> -DOUT=<file.c> -DFUNC=<function name> -P qm_embed_text.cmake
# The text becomes a byte array (no string-literal length limits, any byte survives) followed by a
# NUL, and `const char *FUNC(void)` returns it. OUT is rewritten only when its content changes.
if(NOT IN OR NOT OUT OR NOT FUNC)
  message(FATAL_ERROR "qm_embed_text.cmake: pass -DIN=<file> -DOUT=<file.c> -DFUNC=<name>")
endif()
file(READ "${IN}" _hex HEX)
# 16 bytes (32 hex digits) per line
string(LENGTH "${_hex}" _len)
set(_bytes "")
set(_pos 0)
while(_pos LESS _len)
  string(SUBSTRING "${_hex}" ${_pos} 32 _chunk)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _chunk "${_chunk}")
  string(APPEND _bytes "${_chunk}\n    ")
  math(EXPR _pos "${_pos} + 32")
endwhile()
get_filename_component(_name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
"/* Generated from ${_name} by cmake/qm_embed_text.cmake at build time: do not edit. */
#include \"scenario_loader.h\"

static const char qm_embedded_text[] = {
    ${_bytes}0x00};

const char *${FUNC}(void)
{
    return qm_embedded_text;
}
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
