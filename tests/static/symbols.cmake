# symbols.cmake - fails when the static library defines a global symbol that
# is not the public API's (tpla_ prefix). cmake -DNM=nm -DLIB=libtpla.a -P symbols.cmake
execute_process(COMMAND ${NM} -g --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${LIB} failed")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* [A-Za-z] (.+)$")
    set(name "${CMAKE_MATCH_1}") # the next MATCHES resets CMAKE_MATCH_1
    # DW.ref.__gxx_personality_v0: the linker's shared hidden copy of C++'s personality
    # pointer, kept global for libstdc++ (cmake/localize_hidden.cmake)
    if(NOT name MATCHES "^tpla_" AND NOT name MATCHES "^DW\\.ref\\.")
      list(APPEND bad "${name}")
    endif()
  endif()
endforeach()
list(LENGTH bad n)
if(n GREATER 0)
  message(FATAL_ERROR "${LIB} defines ${n} global symbols outside the API: ${bad}")
endif()
message(STATUS "${LIB}: only tpla_ symbols are global")
