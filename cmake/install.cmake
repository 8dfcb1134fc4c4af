# Install: libraries, public headers, tools, pkg-config file, CMake package.
include(CMakePackageConfigHelpers)
install(TARGETS mscclpp EXPORT mscclppTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mscclpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mscclppTargets NAMESPACE mscclpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mscclppConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mscclppConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mscclppConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mscclppConfig.cmake ${PROJECT_BINARY_DIR}/mscclppConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mscclpp.pc.in ${PROJECT_BINARY_DIR}/mscclpp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mscclpp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
